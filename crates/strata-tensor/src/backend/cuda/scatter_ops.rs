//! CUDA kernels of `ops/scatter_ops.rs` (session 60).
//!
//! * `scan_rows` / `scan_cols`: the scans (`cumprod`, `cummax`/`cummin`,
//!   `logcumsumexp`) as an associative combine of `(value, position)`
//!   states: a warp per contiguous row (`inner == 1`; 32 elements per step,
//!   a shuffle scan, the running state carried between steps) or a thread
//!   per `(outer, inner)` column walking `n` in order. An empty state
//!   (position -1) is the identity. `cummax` keeps the later of two states
//!   unless the earlier is strictly better (NaN best), which is PyTorch's
//!   sequential rule; `logcumsumexp` combines as `_log_add_exp_helper`.
//!   f16/bf16 compute in f32, integers in i64 (products wrap, as unsigned).
//! * `scatter_assign`: `out[..index..] = src` as bits (which of duplicate
//!   indices wins is unspecified, as in PyTorch's CUDA kernels);
//!   `scatter_reduce`: `atomicAdd` for sums, a compare-and-swap loop for
//!   products, `amax`, `amin` (f32, f64, i32, i64; the tensor layer widens
//!   the other dtypes).
//!
//! Index values were checked by the tensor layer; every kernel still bounds
//! them by `lim` (no access outside the operands), and all index arithmetic
//! is 64-bit.

use super::context::{failure, CudaDevice};
use super::dimops::grid;
use super::kernels::{compute_ty, load, storage_ty, store, tag, PRELUDE};
use super::launch::{base_ptr, launch, KArg};
use super::nn::{bits_ty, for_each_position, grid_for, index_dims, index_meta, IMETA, NT};
use crate::backend::{Arg, DimShape};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::scatter_ops::{Combine, ScanOp, ScatterKernel};

/// Runs one kernel on `dev`'s current stream.
pub(crate) fn run(dev: &CudaDevice, k: ScatterKernel<'_>) -> Result<()> {
    match k {
        ScatterKernel::Scan {
            op,
            out,
            indices,
            input,
            s,
        } => scan(dev, op, out, indices, input, s),
        ScatterKernel::Scatter {
            combine,
            out,
            index,
            src,
            dim,
            bound,
        } => scatter(dev, combine, out, index, src, dim, bound),
    }
}

fn op_code(op: ScanOp) -> i32 {
    match op {
        ScanOp::Prod => 0,
        ScanOp::Max => 1,
        ScanOp::Min => 2,
        ScanOp::LogSumExp => 3,
    }
}

/// The scan module for elements of `d` and scan `op`.
fn scan_source(d: DType, op: ScanOp) -> String {
    let float = d.is_float();
    let c = if float { compute_ty(d) } else { "i64" };
    let ld = if float {
        load(d, "x")
    } else {
        "((i64)(x))".to_string()
    };
    let st = if float {
        store(d, "v")
    } else {
        format!("(({})(v))", storage_ty(d))
    };
    let (lg, ex) = if c == "float" {
        ("log1pf", "expf")
    } else {
        ("log1p", "exp")
    };
    // PyTorch's `_log_add_exp_helper` (floats only: logcumsumexp).
    let lae = if float {
        format!(
            "__device__ __forceinline__ C lae(C x, C y) {{\n\
               const C lo = isnan_(y) ? y : (y < x ? y : x);\n\
               const C hi = isnan_(y) ? y : (x < y ? y : x);\n\
               if (lo != hi || (lo - lo) == (C)0) return {lg}({ex}(lo - hi)) + hi;\n\
               return x;\n\
             }}\n"
        )
    } else {
        "__device__ __forceinline__ C lae(C x, C) { return x; }\n".to_string()
    };
    format!(
        "{PRELUDE}typedef {t} T;\ntypedef {c} C;\n#define OP {op}\n#define FLOAT {fl}\n\
         __device__ __forceinline__ C ld(T x) {{ return (C){ld}; }}\n\
         __device__ __forceinline__ T st(C v) {{ return {st}; }}\n{lae}{SCAN}",
        t = storage_ty(d),
        op = op_code(op),
        fl = i32::from(float),
    )
}

const SCAN: &str = r#"
// A running state: the value and the position it came from; i < 0 is the
// empty state (the identity of `comb`).
struct S { C v; i64 i; };

__device__ __forceinline__ C cmul(C a, C b) {
#if FLOAT
  return a * b;
#else
  return (C)((u64)a * (u64)b);
#endif
}

// `a` (earlier) combined with `b` (later).
__device__ __forceinline__ S comb(S a, S b) {
  if (b.i < 0) return a;
  if (a.i < 0) return b;
#if OP == 0
  S r; r.v = cmul(a.v, b.v); r.i = b.i; return r;
#elif OP == 1
  return (isnan_(b.v) || (!isnan_(a.v) && b.v >= a.v)) ? b : a;
#elif OP == 2
  return (isnan_(b.v) || (!isnan_(a.v) && b.v <= a.v)) ? b : a;
#else
  S r; r.v = lae(b.v, a.v); r.i = b.i; return r;
#endif
}

__device__ __forceinline__ S shup(S s, int o) {
  S r; r.v = __shfl_up_sync(0xffffffffu, s.v, o); r.i = __shfl_up_sync(0xffffffffu, s.i, o); return r;
}
__device__ __forceinline__ S shget(S s, int l) {
  S r; r.v = __shfl_sync(0xffffffffu, s.v, l); r.i = __shfl_sync(0xffffffffu, s.i, l); return r;
}

// A warp per contiguous row of n elements, 32 per step.
extern "C" __global__ void __launch_bounds__(256) scan_rows(const T* in, T* out, i64* idx, i64 rows, i64 n) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const i64 per = 256 / 32;
  for (i64 r0 = (i64)blockIdx.x * per; r0 < rows; r0 += (i64)gridDim.x * per) {
    const i64 r = r0 + w;
    if (r >= rows) continue;  // uniform across the warp
    const T* x = in + r * n;
    T* y = out + r * n;
    i64* yi = idx ? idx + r * n : (i64*)0;
    S carry; carry.v = (C)0; carry.i = -1;
    for (i64 k0 = 0; k0 < n; k0 += 32) {
      const i64 k = k0 + lane;
      S v; v.v = (C)0; v.i = -1;
      if (k < n) { v.v = ld(x[k]); v.i = k; }
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const S u = shup(v, o);
        if (lane >= o) v = comb(u, v);
      }
      v = comb(carry, v);
      if (k < n) {
        y[k] = st(v.v);
        if (yi) yi[k] = v.i;
      }
      carry = shget(v, 31);
    }
  }
}

// A thread per (outer, inner) column, walking n in order.
extern "C" __global__ void __launch_bounds__(256) scan_cols(const T* in, T* out, i64* idx, i64 outer, i64 n, i64 inner) {
  const i64 cols = outer * inner;
  for (i64 c = (i64)blockIdx.x * 256 + threadIdx.x; c < cols; c += (i64)gridDim.x * 256) {
    const i64 o = c / inner, i = c % inner;
    const i64 base = o * n * inner + i;
    S acc; acc.v = (C)0; acc.i = -1;
    for (i64 k = 0; k < n; k++) {
      S v; v.v = ld(in[base + k * inner]); v.i = k;
      acc = comb(acc, v);
      out[base + k * inner] = st(acc.v);
      if (idx) idx[base + k * inner] = acc.i;
    }
  }
}
"#;

fn scan(
    dev: &CudaDevice,
    op: ScanOp,
    out: &Arg,
    indices: Option<&Arg>,
    input: &Arg,
    s: DimShape,
) -> Result<()> {
    if s.outer == 0 || s.n == 0 || s.inner == 0 {
        return Ok(());
    }
    let d = input.dtype;
    let key = format!("scatter_ops:scan:{}:{}", tag(d), op_code(op));
    let f = super::nvrtc::functions(
        dev,
        &key,
        || scan_source(d, op),
        &["scan_rows", "scan_cols"],
    )?;
    let (pin, pout) = (base_ptr(input), base_ptr(out));
    let pidx = indices.map_or(0u64, base_ptr);
    let n = s.n as i64;
    if s.inner == 1 {
        let rows = s.outer as i64;
        let g = grid(dev, s.outer, 8);
        let kargs = [
            KArg::of(&pin),
            KArg::of(&pout),
            KArg::of(&pidx),
            KArg::of(&rows),
            KArg::of(&n),
        ];
        // SAFETY: the arguments match `scan_rows(const T*, T*, i64*, i64
        // rows, i64 n)`; input and out are contiguous with rows * n elements
        // of `d`, indices (when not null) contiguous i64 of the same count.
        unsafe { launch(dev, &key, f[0], (g, 1, 1), (256, 1, 1), dev.stream(), kargs) }
    } else {
        let (outer, inner) = (s.outer as i64, s.inner as i64);
        let g = grid(dev, s.outer * s.inner, 256);
        let kargs = [
            KArg::of(&pin),
            KArg::of(&pout),
            KArg::of(&pidx),
            KArg::of(&outer),
            KArg::of(&n),
            KArg::of(&inner),
        ];
        // SAFETY: the arguments match `scan_cols(const T*, T*, i64*, i64
        // outer, i64 n, i64 inner)`; the operands are contiguous with
        // outer * n * inner elements (indices i64, when not null).
        unsafe { launch(dev, &key, f[1], (g, 1, 1), (256, 1, 1), dev.stream(), kargs) }
    }
}

/// The scatter module: `scatter_assign` moves elements as bits of `esize`
/// bytes; `scatter_reduce` (`reduce` only for f32, f64, i32, i64) combines
/// with `combine`.
fn scatter_source(esize: usize, d: DType, idx: DType, combine: Combine) -> String {
    let code = match combine {
        Combine::Assign => 0,
        Combine::Sum => 1,
        Combine::Prod => 2,
        Combine::Max => 3,
        Combine::Min => 4,
    };
    let (e, u) = if combine == Combine::Assign {
        (bits_ty(esize), bits_ty(esize))
    } else {
        (
            storage_ty(d),
            if d.size() == 8 {
                "unsigned long long"
            } else {
                "unsigned int"
            },
        )
    };
    format!(
        "{PRELUDE}{IMETA}typedef {e} E;\ntypedef {u} U;\ntypedef {i} I;\n#define MODE {code}\n#define FLOATE {fl}\n{SCATTER}",
        i = storage_ty(idx),
        fl = i32::from(d.is_float()),
    )
}

const SCATTER: &str = r#"
// The element offsets of position i of index's shape: out (without dim),
// src, index.
__device__ __forceinline__ void offsets(const IMeta& m, i64 i, i64& oo, i64& os, i64& oi) {
  i64 r = i;
  oo = 0; os = 0; oi = 0;
  for (int d = m.nd - 1; d >= 0; --d) {
    const i64 c = r % m.size[d];
    r /= m.size[d];
    if (d != m.dim) oo += c * m.so[d];
    oi += c * m.si[d];
    os += c * m.ss[d];
  }
}

#if MODE != 0
__device__ __forceinline__ E comb(E a, E b) {
#if MODE == 2
#if FLOATE
  return a * b;
#else
  return (E)((U)a * (U)b);
#endif
#elif MODE == 3
  return (isnan_(b) || a < b) ? b : a;
#else
  return (isnan_(b) || b < a) ? b : a;
#endif
}

__device__ __forceinline__ void aadd(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void aadd(double* p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void aadd(int* p, int v) { atomicAdd(p, v); }
__device__ __forceinline__ void aadd(i64* p, i64 v) { atomicAdd((u64*)p, (u64)v); }

// The bits of an element as the unsigned type of its size, and back.
__device__ __forceinline__ unsigned int tobits(float v) { return __float_as_uint(v); }
__device__ __forceinline__ float frombits(unsigned int u, float) { return __uint_as_float(u); }
__device__ __forceinline__ unsigned long long tobits(double v) { return (unsigned long long)__double_as_longlong(v); }
__device__ __forceinline__ double frombits(unsigned long long u, double) { return __longlong_as_double((long long)u); }
__device__ __forceinline__ unsigned int tobits(int v) { return (unsigned int)v; }
__device__ __forceinline__ int frombits(unsigned int u, int) { return (int)u; }
__device__ __forceinline__ unsigned long long tobits(i64 v) { return (unsigned long long)v; }
__device__ __forceinline__ i64 frombits(unsigned long long u, i64) { return (i64)u; }

// p = comb(p, v) atomically (a compare-and-swap loop on the bits).
__device__ __forceinline__ void apply(E* p, E v) {
#if MODE == 1
  aadd(p, v);
#else
  U* q = reinterpret_cast<U*>(p);
  U old = *q, assumed;
  do {
    assumed = old;
    const U nb = tobits(comb(frombits(assumed, (E)0), v));
    if (nb == assumed) return;  // nothing changes
    old = atomicCAS(q, assumed, nb);
  } while (old != assumed);
#endif
}
#endif

// An index outside [0, lim) writes nothing (the tensor layer excluded it;
// defence in depth).
extern "C" __global__ void scatter_kernel(E* out, const E* src, const I* idx, IMeta m, i64 lim) {
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < m.n; i += (i64)gridDim.x * blockDim.x) {
    i64 oo, os, oi;
    offsets(m, i, oo, os, oi);
    const i64 k = (i64)idx[oi];
    if (k < 0 || k >= lim) continue;
#if MODE == 0
    out[oo + k * m.so[m.dim]] = src[os];
#else
    apply(out + oo + k * m.so[m.dim], src[os]);
#endif
  }
}
"#;

fn scatter(
    dev: &CudaDevice,
    combine: Combine,
    out: &Arg,
    index: &Arg,
    src: &Arg,
    dim: usize,
    bound: usize,
) -> Result<()> {
    let lim = bound as i64;
    let n = index.layout.numel();
    if n == 0 {
        return Ok(());
    }
    if combine != Combine::Assign
        && !matches!(out.dtype, DType::F32 | DType::F64 | DType::I32 | DType::I64)
    {
        return Err(failure(
            dev.device(),
            "scatter",
            format!(
                "internal: {} output of a reduction (the caller widens it)",
                out.dtype
            ),
        ));
    }
    let key = format!(
        "scatter_ops:scatter:{}:{}:{:?}",
        tag(out.dtype),
        tag(index.dtype),
        combine
    );
    let esize = out.dtype.size();
    let f = super::nvrtc::functions(
        dev,
        &key,
        || scatter_source(esize, out.dtype, index.dtype, combine),
        &["scatter_kernel"],
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
        esize as u64,
        src.dtype.size() as u64,
        index.dtype.size() as u64,
    ];
    for_each_position(shape, &looped, (so, ss, si), es, |off| {
        let (qo, qs, qi) = (po + off[0], ps + off[1], pi + off[2]);
        // SAFETY: parameters match `scatter_kernel(E*, const E*, const I*,
        // IMeta, i64)`; positions range over index's shape (the walked dims
        // from this position of the looped ones), which src's layout covers
        // and out's covers except along `dim`, where index values in
        // [0, lim) address out.
        unsafe {
            launch(
                dev,
                "scatter_kernel",
                f[0],
                (grid_for(m.n as usize, NT as usize), 1, 1),
                (NT, 1, 1),
                dev.stream(),
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

#[cfg(test)]
mod tests {
    use super::*;

    const DTYPES: [DType; 8] = [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::Bool,
    ];

    /// Braces and parentheses balance outside `//` comments (a cheap check
    /// that the formatting of the generated source left no stray `{{`),
    /// and no Rust leaked into the C (`pub(`).
    fn balanced(s: &str) -> bool {
        if s.contains("pub(") {
            return false;
        }
        let (mut b, mut p) = (0i64, 0i64);
        let code = s.lines().map(|l| l.split("//").next().unwrap_or(""));
        for c in code.flat_map(str::chars) {
            match c {
                '{' => b += 1,
                '}' => b -= 1,
                '(' => p += 1,
                ')' => p -= 1,
                _ => {}
            }
            if b < 0 || p < 0 {
                return false;
            }
        }
        b == 0 && p == 0
    }

    #[test]
    fn every_module_is_generated() {
        for d in DTYPES {
            for op in [ScanOp::Prod, ScanOp::Max, ScanOp::Min, ScanOp::LogSumExp] {
                let s = scan_source(d, op);
                assert!(
                    s.contains("void __launch_bounds__(256) scan_rows("),
                    "{d} {op:?}"
                );
                assert!(s.contains("scan_cols(") && balanced(&s), "{d} {op:?}");
                if std::env::var("STRATA_DUMP_CUDA").is_ok() {
                    std::fs::write(format!("/tmp/c60_cuda/scan_{}_{op:?}.cu", d.name()), &s)
                        .unwrap();
                }
            }
            for c in [
                Combine::Assign,
                Combine::Sum,
                Combine::Prod,
                Combine::Max,
                Combine::Min,
            ] {
                for idx in [DType::I64, DType::I32] {
                    let s = scatter_source(d.size(), d, idx, c);
                    assert!(
                        s.contains("void scatter_kernel(") && balanced(&s),
                        "{d} {c:?}"
                    );
                    if std::env::var("STRATA_DUMP_CUDA").is_ok() {
                        std::fs::write(
                            format!("/tmp/c60_cuda/scatter_{}_{}_{c:?}.cu", d.name(), idx.name()),
                            &s,
                        )
                        .unwrap();
                    }
                }
            }
        }
    }
}
